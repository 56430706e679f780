# runtime (tools)
