"""``python -m fleet_rl.catalog``: print both tables (a quick look at what the kernel sees)."""

from __future__ import annotations

from fleet_rl.catalog import GPUS, MODELS


def main() -> None:
    """Print both tables (a quick look at what the kernel sees)."""
    gpu_row = "{:<10} {:>7} {:>8} {:>8} {:>7} {:>6} {:>9}"
    print(gpu_row.format("gpu", "mem GB", "BW GB/s", "bf16 TF", "fp8 TF", "TDP W", "link GB/s"))
    for gpu in GPUS.values():
        bf16 = gpu.dense_tflops.get("bf16")
        fp8 = gpu.dense_tflops.get("fp8")
        print(
            gpu_row.format(
                gpu.name,
                f"{gpu.memory_gb:.1f}",
                f"{gpu.memory_bandwidth_gb_s:.0f}",
                "-" if bf16 is None else f"{bf16:.1f}",
                "-" if fp8 is None else f"{fp8:.1f}",
                f"{gpu.tdp_w:.0f}",
                f"{gpu.interconnect_gb_s:.0f}",
            )
        )
    print()
    model_row = "{:<14} {:>9} {:>9} {:>20}"
    print(model_row.format("model", "params B", "active B", "KV KiB/token (bf16)"))
    for model in MODELS.values():
        print(
            model_row.format(
                model.name,
                f"{model.num_params / 1e9:.3f}",
                f"{model.num_active_params / 1e9:.3f}",
                f"{model.kv_cache_bytes_per_token() / 1024:.0f}",
            )
        )


if __name__ == "__main__":
    main()
