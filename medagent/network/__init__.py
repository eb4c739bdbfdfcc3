"""Network analysis of clinical interviews (the history-taking paper): pure numpy / scipy / networkx, importable without Ray.

Every function states its conventions in its module docstring (see ``../shared/netref/METHODS.md``):

* ``svn``: statistically validated finding–diagnosis links (hypergeometric, Bonferroni / BH over all pairs).
* ``modularity``: Barber's Q (``barber_q``, the single source of truth) and its maximisation.
* ``nestedness`` / ``nulls``: NODF (vegan-equal) and its null models (r00, r0, c0, r1, curveball, ...); the
  significance of Q against optimised null networks (``modularity_null``).
* ``roles``: participation c and within-module z (bipartite ``czvalues``).
* ``information``: KL(P(D|f) || P(D)).
* ``markov`` / ``flow``: Markov order selection, cross-validated accuracy, the flow network, two phases.
* ``validation``: Spearman's rho of the agent's design against physicians' behaviour.
* ``meditod``: MediTOD gold dialogues as ``Annotation``.
* ``analysis`` / ``report``: the whole analysis and its files.
"""

from medagent.network.modularity import Partition, barber_q, count_modules, maximise_barber_q
from medagent.network.nestedness import NODFResult, nodf, wnodf
from medagent.network.nulls import NULL_MODELS, NullSummary, modularity_null, nodf_null
from medagent.network.svn import SVNResult, incidence_from_annotations, svn_links

__all__ = [
    "NODFResult",
    "NULL_MODELS",
    "NullSummary",
    "Partition",
    "SVNResult",
    "barber_q",
    "count_modules",
    "incidence_from_annotations",
    "maximise_barber_q",
    "modularity_null",
    "nodf",
    "nodf_null",
    "svn_links",
    "wnodf",
]
