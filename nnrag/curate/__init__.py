"""Curation of the library: copies at four levels (raw, exact, near, structural) stored as
clusters, and uniqueness against other code such as LEMUR's models. Search groups its results by
these clusters, and ``nnrag.datasets`` splits its export by them."""
