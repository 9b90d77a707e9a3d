"""Roofline: hardware specs with cited sources, FLOP/byte formulas -> % of peak (docs/design.md §4, §6); import the module you need (model is pure, evaluate reads the wiki)."""
