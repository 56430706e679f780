# kernel (tools)
