"""Datasets made from the library: the fine-tuning export of spec -> code pairs (blocks and,
when asked, synthesised implementations), split without leakage by the copy clusters of
``nnrag.curate``, with a dataset card."""
