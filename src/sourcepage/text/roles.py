"""The roles and parties a text names (manufacturer, importer, employer, employee, PCBU,
officer, …): whose duty a sentence or a section sets out. Confusing them changes an answer
(the importers' article does not state the manufacturer's duty), so the quote selector
(``support.select``) and the answer gate (``support.answer.stated``) read them.
Matched on words, not stems: the stemmer makes "employed" the employer's, "operation" the
operator's and "regulation" the regulator's."""

from __future__ import annotations

import re
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


def parties(roles: list[str] | set[str]) -> set[str]:
    """The parties of ``roles``."""
    return {party(r) for r in roles}


#: roles that are adjectives: "authorized persons", not "authorizeds"
_ADJECTIVES = {"authorized", "affected", "competent", "qualified", "self-employed"}


def plural(role: str) -> str:
    """How a reason names the holders of a role: "importers", "PCBUs", "competent persons"."""
    if role in _ADJECTIVES:
        return f"{role} persons"
    return "PCBUs" if role == "pcbu" else role + "s"
