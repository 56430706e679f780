# kernel tests (label kernel)
