# model (tools)
