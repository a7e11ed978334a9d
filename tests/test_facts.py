"""The kind of fact a question asks for and whether a sentence states one
(``text.facts``): the one test read by the quote choice, the answer check, the feature
``value_missing`` and the decision gate."""

from __future__ import annotations

from sourcepage.text.facts import WORDS, asked_facts, asked_value, states


def _kinds(question: str) -> list[str]:
    return [a.kind for a in asked_facts(question)]


def test_a_question_asks_for_at_most_one_value_the_most_specific() -> None:
    cases = {
        "How long should a smoked beef brisket rest before slicing?": "duration",
        "How often must gas detectors be bump-tested?": "frequency",
        "Within how many minutes must a rescue team reach an entrant?": "duration",
        "What is the maximum dollar penalty for a willful violation?": "money",
        "What colour must lockout padlocks be?": "colour",
        "How high must the perimeter fence be?": "length",
        "At what concentration in ppm must workers be evacuated?": "concentration",
        "How many workers must a PCBU employ?": "number",
        "How much time does a worker have to report an injury?": "duration",
        "At what frequency must harnesses be inspected?": "frequency",
        "What height limits apply when stacking lumber?": "length",
    }
    for q, kind in cases.items():
        got = asked_value(q)
        assert got is not None and got.kind == kind and got.value, q
        assert q[got.start :].lower().startswith(got.phrase.lower()), q
    assert asked_value("Within how many minutes must a rescue team reach an entrant?").phrase == (
        "Within how many minutes"
    )
    assert asked_value("Who may remove a lockout device?") is None
    assert asked_value("What is the capital of Australia?") is None


def test_a_fee_a_share_or_a_number_of_years_is_a_value_of_its_kind() -> None:
    """A question that asks for a fee, a share of a group or a number of years asks for a
    value of that kind, not for a statement or any number (pool dev: three unsupported
    questions were answered with a time limit, a procedure or "1 or more" quoted)."""
    cases = {
        "What fee does the regulator charge when a removalist lodges the notice?": "money",
        "What filing fee applies when applying for external review?": "money",
        "How much does a union official have to pay to apply for a permit?": "money",
        "What minimum voter turnout, as a share of the work group, is needed?": "percentage",
        "What is the maximum number of years the assessor can be disqualified?": "duration",
        "What is the longest period an exemption can be granted for?": "duration",
        "How many inches from the point of operation must the hands stay?": "length",
    }
    for q, kind in cases.items():
        got = asked_value(q)
        assert got is not None and got.kind == kind, q
    # a fee named without asking for its amount asks for no money
    assert asked_value("How long does someone have to pay an infringement fee?").kind == "duration"
    assert asked_value("Can cost be taken into account when deciding what is practicable?") is None
    assert asked_value("How much time does a worker have to report an injury?").kind == "duration"


def test_asked_facts_come_in_the_order_the_question_asks_them() -> None:
    assert _kinds("How often must energy control procedures be inspected?") == ["frequency"]
    assert _kinds("What are the steps of a job hazard analysis?") == ["list"]
    assert _kinds("Who may remove a lock, and how long may it stay?") == ["actor", "duration"]
    assert _kinds("When must hearing protection be worn?") == ["condition"]
    assert _kinds("How many minutes must we wait before re-entry?") == ["duration"]
    assert _kinds("Describe lockout.") == []
    who = asked_facts("Who may remove a lock?")[0]
    assert not who.value and who.describe() == WORDS["actor"] and who.phrase == "Who"


def test_a_value_is_stated_by_a_number_with_a_unit_of_its_kind() -> None:
    assert states("Certificates are valid for three years.", "duration")
    assert states("Wait 5 minutes before entry.", "duration")
    assert states("Use a 10-minute rest break.", "duration")
    assert states("no more than 1/8 inch beyond the head", "length")
    assert states("Spaces more than five feet deep need a mechanical device.", "length")
    assert states("Spaces more than five feet deep need a mechanical device.", "number")
    assert states("fines of up to $600,000 apply", "money")
    assert states("Padlocks are red.", "colour")
    assert not states("Wait until the capacitors are discharged.", "duration")  # no number of minutes
    assert not states("See 29 CFR 1910.147 for details.", "number")  # a section is no value
    assert not states("Comply with ISO 45001 as revised in 2018.", "number")  # nor a standard, a year
    assert not states("The guard must be adjusted.", "length")
    assert not states("The fence is 6 hours old.", "length")


def test_a_frequency_is_stated_by_an_interval() -> None:
    assert states("inspect at least annually", "frequency")
    assert states("Inspect energy control procedures at least annually.", "frequency")
    assert states("Review them at least once a year.", "frequency")
    assert states("Check the harness before each use.", "frequency")
    assert states("Rotate workers at the start of every shift.", "frequency")
    assert states("Test the alarm per hour of operation.", "frequency")
    assert not states("The periodic inspection assures that employees know the procedure.", "frequency")


def test_a_person_a_list_and_a_condition() -> None:
    assert states("The inspector must be an authorized employee.", "actor")
    assert not states("The lock stays on the valve.", "actor")
    assert states("Hazards include noise, heat, and chemicals.", "list")
    assert states("It does not cover agriculture, construction, maritime, or drilling.", "list")
    assert states("Date of the inspection,", "list", "item")
    assert not states("Ideally, after you identify hazards, you will take steps to reduce them.", "list")
    assert states("Wear hearing protection when noise exceeds 85 dBA.", "condition")
    assert not states("Hearing protection is free of charge.", "condition")


def test_a_disclaimer_that_names_no_list_is_not_a_list() -> None:
    """OSHA 3071's disclaimer was quoted as the answer to "What are the steps of a job
    hazard analysis?"; a negated "include" enumerates nothing."""
    disclaimer = (
        "The job procedures discussed in this booklet are for illustration only and do not "
        "necessarily include all the steps, hazards, and protections that apply to your industry."
    )
    assert not states(disclaimer, "list")
    assert states("The analysis includes the steps, the hazards and the controls.", "list")
