"""Curation of the library into datasets: copies at four levels (raw, exact, near, structural)
stored as clusters, uniqueness against other code such as LEMUR's models, and the fine-tuning
export of spec -> code pairs with leakage-free splits."""
