"""Target-independent lowering of the tile IR to pyptx modules.

program.py is the entry point (`lower_module`: a file's kernels, each by kernel.py
or simt.py); target_base.py is the interface an architecture's folder implements
(`Target`: its MMA unit and the hooks the core calls; sm90: wgmma; sm100: tcgen05).
"""
