"""Target-independent lowering of the tile IR to pyptx modules.

kernel.py is the entry point (`lower_kernel`); target.py is the interface an
architecture implements for its MMA unit (sm90: wgmma; sm100: tcgen05).
"""
