"""The kernel against published measurements (``calibration``) and the kernel's and the reward's speed
(``speed``)."""
