# decode tools
