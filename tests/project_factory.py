"""A small construction collection for the tests: a user's own project records next to
published guidance, as two corpus folders built with ``pdf_factory`` (reportlab).

``project_records(dir)`` — SWMS, method statements and an inspection record of two projects,
with the construction fields ``project``, ``project_type``, ``phase``, ``work_package``,
``contractor`` and ``asset_id`` (IFC GlobalIds hold ``$`` and ``_``):

- ``rt-swms-precast-panels`` (riverside-tower, structure, ``precast_tiltup;lifting``, asset_id
  ``2O2Fr$t4X7Zf8NOew3FLOH;1hOSvn6df7F8_7GcBWlRGQ``, 2 pages);
- ``rt-method-basement-dig`` (riverside-tower, groundworks, excavation, PIT-01);
- ``rt-scaffold-inspection`` (riverside-tower, envelope, scaffolding, SCAF-A-03);
- ``hb-crane-lift-plan`` (harbour-bridge, structure, lifting, CR-02).

``construction_guidance(dir)`` — two guidance documents with ``project_type=any`` and
``phase=all`` (they apply to every project and phase), as in corpus-construction.

Distinctive phrases sit on one page each: "tilt-up panel" and "lifting inserts" (SWMS p1),
"exclusion zone" (SWMS p2), "trench shoring" (method statement), "scaffold tag"
(inspection), "crawler crane" (lift plan), "guardrail" (falls guidance), "hierarchy of
control" (WHS guidance).
"""

from __future__ import annotations

from pathlib import Path

import pdf_factory as pf

SWMS_PAGES = [
    "Safe work method statement: installation of precast tilt-up panels, Level 1 to Level 4\n"
    "High risk construction work: tilt-up panel erection with a mobile crane. The crew checks "
    "the lifting inserts of every panel against the shop drawings before the lift, confirms the "
    "concrete strength certificate, and fits the rigging to the marked lifting inserts only. "
    "Temporary braces are fixed to the panel and the floor slab before the crane releases the load.",
    "Controls during the lift\n"
    "An exclusion zone of one and a half times the panel height is barricaded below the lift. "
    "Only the dogman and the crane crew enter the exclusion zone. Work stops when the wind speed "
    "exceeds 10 metres per second. Tag lines are used to control the panel.",
]
METHOD_PAGES = [
    "Method statement: basement excavation and trench shoring, grid lines A to D\n"
    "The excavation reaches 4.2 metres. Trench shoring with hydraulic shores is installed as the "
    "dig proceeds; no worker enters an unsupported trench. Spoil is kept at least 1 metre from the "
    "edge. A competent person inspects the excavation daily and after rain.",
]
INSPECTION_PAGES = [
    "Scaffold inspection record: east elevation scaffold bay 3\n"
    "Inspected by the scaffold supervisor on 14 March. Ties, base plates, toe boards and "
    "guardrails in place; one missing midrail replaced. The scaffold tag was updated to green: "
    "safe for use to a duty load of 225 kilograms per bay.",
]
LIFT_PLAN_PAGES = [
    "Lift plan: deck girder placement with a 250 tonne crawler crane\n"
    "The crawler crane works on timber mats over the compacted platform. The heaviest girder "
    "weighs 48 tonnes at a radius of 22 metres, 71 percent of the rated capacity. The lift "
    "supervisor holds a pre-lift meeting with the riggers and the crane operator.",
]
FALLS_PAGES = [
    "Preventing falls from height on construction sites\n"
    "Use a guardrail system on every open edge where a person could fall. A guardrail has a top "
    "rail, a midrail and a toe board. Where a guardrail cannot be installed, use a work "
    "positioning system or a fall arrest system with a competent rescue plan.",
]
WHS_PAGES = [
    "Managing risks on a construction project\n"
    "Identify the hazards, assess the risks, and apply the hierarchy of control: eliminate the "
    "hazard, substitute, isolate, use engineering controls, then administrative controls and "
    "personal protective equipment.",
]

RIVERSIDE = {"project": "riverside-tower", "project_type": "commercial_building"}
PROJECT_ROWS = [
    {
        "doc_id": "rt-swms-precast-panels",
        "title": "SWMS 014 Precast tilt-up panel installation",
        "doc_type": "swms",
        "role": "supporting",
        **RIVERSIDE,
        "phase": "structure",
        "work_package": "precast_tiltup;lifting",
        "contractor": "Acme Precast Pty Ltd",
        "asset_id": "2O2Fr$t4X7Zf8NOew3FLOH;1hOSvn6df7F8_7GcBWlRGQ",
    },
    {
        "doc_id": "rt-method-basement-dig",
        "title": "Method statement MS-03 Basement excavation",
        "doc_type": "method_statement",
        "role": "supporting",
        **RIVERSIDE,
        "phase": "groundworks",
        "work_package": "excavation",
        "contractor": "Deep Dig Civil",
        "asset_id": "PIT-01",
    },
    {
        "doc_id": "rt-scaffold-inspection",
        "title": "Scaffold inspection record, east elevation bay 3",
        "doc_type": "inspection_record",
        "role": "supporting",
        **RIVERSIDE,
        "phase": "envelope",
        "work_package": "scaffolding",
        "contractor": "ScaffCo",
        "asset_id": "SCAF-A-03",
    },
    {
        "doc_id": "hb-crane-lift-plan",
        "title": "Lift plan LP-7 Deck girder placement",
        "doc_type": "lift_plan",
        "role": "supporting",
        "project": "harbour-bridge",
        "project_type": "civil",
        "phase": "structure",
        "work_package": "lifting",
        "contractor": "Harbour JV",
        "asset_id": "CR-02",
    },
]
PAGES = {
    "rt-swms-precast-panels": SWMS_PAGES,
    "rt-method-basement-dig": METHOD_PAGES,
    "rt-scaffold-inspection": INSPECTION_PAGES,
    "hb-crane-lift-plan": LIFT_PLAN_PAGES,
    "guide-falls": FALLS_PAGES,
    "guide-whs-risk": WHS_PAGES,
}
GUIDANCE_ROWS = [
    {
        "doc_id": "guide-falls",
        "title": "Preventing falls in construction",
        "topic": "falls",
        "authority": "Test Regulator",
        "jurisdiction": "AU",
        "project_type": "any",
        "phase": "all",
        "work_package": "working_at_height",
    },
    {
        "doc_id": "guide-whs-risk",
        "title": "Managing WHS risks in construction",
        "topic": "construction",
        "authority": "Test Regulator",
        "jurisdiction": "AU",
        "project_type": "any",
        "phase": "all",
        "work_package": "general",
    },
]


def _folder(corpus_dir: str | Path, rows: list[dict[str, str]], topic: str) -> Path:
    corpus = Path(corpus_dir)
    (corpus / "pdf").mkdir(parents=True, exist_ok=True)
    for row in rows:
        pf.text_pdf(corpus / "pdf" / f"{row['doc_id']}.pdf", PAGES[row["doc_id"]])
    pf.write_manifest(corpus, [{"topic": topic, "jurisdiction": "AU", **r} for r in rows])
    return corpus


def project_records(corpus_dir: str | Path) -> Path:
    """The two projects' records (see the module docstring); returns ``corpus_dir``."""
    return _folder(corpus_dir, PROJECT_ROWS, "construction")


def construction_guidance(corpus_dir: str | Path) -> Path:
    """Two guidance documents for every project and phase; returns ``corpus_dir``."""
    return _folder(corpus_dir, GUIDANCE_ROWS, "construction")
