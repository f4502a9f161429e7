"""Privacy accounting: what ran (an event tree) in, labelled guarantees out.

The core, at this level (every family below imports it; it reaches the families only through
the registry's names, so no two packages import each other):

* :mod:`~privfl.accounting.events` - what ran: steps, scopes, per-client trees, the nodes a
  paper proves directly;
* :mod:`~privfl.accounting.results` - a number with everything needed to read it
  (method, bound or estimate, unit, neighbouring relation, sampling, release, delta);
* :mod:`~privfl.accounting.dispatch` - :func:`evaluate`, the one entry point from an event tree
  to results; :mod:`~privfl.accounting.methods` asks named step accountants about one event;
  :mod:`~privfl.accounting.registry` names them; :mod:`~privfl.accounting.parallel` reads
  records held by several clients; :mod:`~privfl.accounting.base` is their interface;
* shared numerics: :mod:`~privfl.accounting.logspace`, :mod:`~privfl.accounting.safe_epsilon`
  (epsilon for a target delta), :mod:`~privfl.accounting.noise_search` (the smallest noise
  meeting a target); :mod:`~privfl.accounting.update_clipping` (client-update clipping as the
  accountant sees it).

The families, one subpackage each:

* :mod:`~privfl.accounting.rdp` - Renyi DP (Mironov 2017; Mironov, Talwar & Zhang 2019; Wang,
  Balle & Kasiviswanathan 2019);
* :mod:`~privfl.accounting.pld` - pessimistic privacy loss distributions (dp-accounting's PLD,
  with a sound FFT composition);
* :mod:`~privfl.accounting.gdp` - Gaussian DP (Dong, Roth & Su 2019): closed forms and the CLT
  estimate;
* :mod:`~privfl.accounting.fdp` - f-DP trade-off functions and PriFedSync's federated f-DP
  (Zheng et al. 2021);
* :mod:`~privfl.accounting.contraction` - last-iterate accounting by contraction (Asoodeh et al.
  2021);
* :mod:`~privfl.accounting.correlated` - DP-FTRL and BandMF as one Gaussian mechanism;
* :mod:`~privfl.accounting.participation` - random participation (Hasircioglu & Gunduz 2022);
* :mod:`~privfl.accounting.calibrate` - noise, steps or sampling rate for a budget;
* :mod:`~privfl.accounting.audit` - Monte Carlo and exact audits of the bounds.

docs/accounting.md has the map with every accountant's scope.
"""

from privfl.accounting.dispatch import evaluate
from privfl.accounting.events import PrivacyEvent
from privfl.accounting.methods import AccountingOptions
from privfl.accounting.results import PrivacyResult

__all__ = ["AccountingOptions", "PrivacyEvent", "PrivacyResult", "evaluate"]
