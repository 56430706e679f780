# synth (tools)
