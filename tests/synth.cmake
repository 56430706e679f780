# synth (tests)
