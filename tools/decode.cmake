# decode (tools)
decode_tool(decode decode.c)
