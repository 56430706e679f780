# model tests (label model)
