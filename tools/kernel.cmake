# kernel tools
