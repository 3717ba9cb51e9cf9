"""Devices and models as values: a `Device` protocol (device.py) answered by each kind beside its law — a GPU
(gpu.py, roofline.py), an SRAM system (wafer.py), a fitted twin (fitted.py) — the models and number formats
they serve (models.py, formats.py), the built-in entries (builtin.py) and the frozen catalogue a process uses
(catalogue.py, preset_file.py). Nothing outside this package asks which kind a device is."""
