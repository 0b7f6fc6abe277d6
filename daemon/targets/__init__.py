"""What an action touches, in words: the AT-SPI client, the lookup with its budget, policy rules, the gate that applies them."""
