# decode (tools)
