"""The environment server under load (``load``) and in a bounded soak (``soak``, run through ``load``)."""
