# model tools
