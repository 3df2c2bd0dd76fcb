"""LEMUR (``nn-dataset``) registration: blocks adapted to LEMUR's model contract, checked by the
validator gate, trained and scored by LEMUR's own code, read back from LEMUR's database."""

from ..errors import LemurError, LemurNotInstalled, NotAdaptable
from .adapter import Adapted, adapt
from .register import Registration, Setup, listed

# ``register`` the function stays in its module: a package attribute of that name would hide the
# module ``nnrag.lemur.register`` from ``import nnrag.lemur.register as r``
__all__ = ["Adapted", "LemurError", "LemurNotInstalled", "NotAdaptable", "Registration", "Setup", "adapt", "listed"]
