"""Inputs: images and sentences (:mod:`.inputs`) and the tabular benchmarks (:mod:`.tabular_data`)."""
