"""SGLang 0.5.19's own code checks what the tests make openjev send (see `plugin`)."""
