# decode (the lead's tools)
decode_tool(decode decode.c)
