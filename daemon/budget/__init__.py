"""What a task may spend: the price table and [budget] (config.py), a cost from token counts (cost.py), the line a running task meets (meter.py)."""
