"""The roles and parties a text names (manufacturer, importer, employer, employee, PCBU,
officer, …): whose duty a sentence or a section sets out. Confusing them changes an answer
(the importers' article does not state the manufacturer's duty), so the quote selector
(``support.select``: its role features, ``role_features``) and the answer gate
(``support.answer.stated``) read them.
Matched on words, not stems: the stemmer makes "employed" the employer's, "operation" the
operator's and "regulation" the regulator's."""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from functools import lru_cache

#: roles and parties whose confusion changes an answer (their plural and "-ise" forms match too)
ROLES = (
    "manufacturer importer distributor supplier designer installer employer employee worker "
    "supervisor contractor subcontractor owner operator pcbu officer inspector regulator "
    "attendant entrant rescuer aider authorized affected competent qualified client principal "
    "landlord tenant self-employed representative committee user"
).split()

#: a word of a text, hyphenated compounds whole ("self-employed")
_WORD = re.compile(r"[a-z]+(?:-[a-z]+)*")


@lru_cache(maxsize=1)
def _role_forms() -> dict[str, str]:
    """Each form of a role word (singular, plural, "authorised") → the role. Roles are
    matched on words, not stems: the stemmer makes "employed" the employer's, "operation"
    the operator's and "regulation" the regulator's."""
    forms = {}
    for role in ROLES:
        for form in (role, role + "s", role.replace("iz", "is")):
            forms[form] = role
    return forms


def roles_in(text: str) -> list[str]:
    """The roles ``text`` names, in text order (repeats kept)."""
    forms = _role_forms()
    return [forms[w] for w in _WORD.findall(text.lower()) if w in forms]


#: roles that name one party under another jurisdiction's word: Australian and New Zealand
#: law puts the employer's duties on the PCBU (person conducting a business or undertaking)
#: and calls employees workers
_PARTY = {"pcbu": "employer", "worker": "employee"}


def party(role: str) -> str:
    """The party a role word names (``_PARTY``: a PCBU is the employer, a worker the employee)."""
    return _PARTY.get(role, role)


def parties(roles: Collection[str]) -> set[str]:
    """The parties of ``roles``."""
    return {party(r) for r in roles}


def lead_role(roles: Sequence[str], q_roles: Collection[str]) -> float:
    """1 when the first role a unit names (``roles_in``) is one of ``q_roles``' parties, −1
    when it is another, 0 when it names none or the question names none. The actor of a
    duty comes first ("Before placing machinery on the market, importers shall ensure … by
    the manufacturer"): naming the asked role further on does not make it the importers'
    duty the manufacturer's."""
    if not q_roles or not roles:
        return 0.0
    return 1.0 if party(roles[0]) in parties(q_roles) else -1.0


def role_features(named: Sequence[str], q_roles: Collection[str]) -> dict[str, float]:
    """How the roles a unit names (``named``, in text order) compare with those a question
    names (``q_roles``), as parties: ``role_match`` (the share of the question's parties the
    unit names), ``role_other`` (1 when the unit names parties and none of the question's)
    and ``lead_role`` (``lead_role``). The quote selector's role features
    (``support.select.FEATURE_WORDS``), computed here in one place from the role words."""
    q, s = parties(q_roles), parties(named)
    return {
        "role_match": len(q & s) / len(q) if q else 0.0,
        "role_other": float(bool(q) and bool(s) and not (q & s)),
        "lead_role": lead_role(named, q_roles),
    }


#: roles that are adjectives: "authorized persons", not "authorizeds"
_ADJECTIVES = {"authorized", "affected", "competent", "qualified", "self-employed"}


def plural(role: str) -> str:
    """How a reason names the holders of a role: "importers", "PCBUs", "competent persons"."""
    if role in _ADJECTIVES:
        return f"{role} persons"
    return "PCBUs" if role == "pcbu" else role + "s"
