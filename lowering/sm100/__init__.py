"""sm_100a (Blackwell) backend pieces: tcgen05 descriptors, the TMEM plan, and the
hand-written FlashAttention kernel the lowering is modelled on."""
