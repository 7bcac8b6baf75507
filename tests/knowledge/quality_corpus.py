"""A small labelled corpus for retrieval quality: questions phrased without their document's words.

Each target document answers exactly one question; the fillers are plausible neighbours on other
subjects. Used by the quality test (local model) and by `make bench`.
"""

from __future__ import annotations

TARGETS: list[tuple[str, str, str]] = [
    (
        "ops/credential-rotation.md",
        "# Credential rotation\n\nGenerate a fresh Postgres password in Vault, update the deployment secret, "
        "then restart the pods so they pick it up.\n",
        "how can I change the login of our SQL server",
    ),
    (
        "ops/backups.md",
        "# Backups\n\nSnapshots of every volume are taken nightly and kept for thirty days in cold storage.\n",
        "where are copies of our disks saved and for how long",
    ),
    (
        "hr/parental-leave.md",
        "# Parental leave\n\nNew mothers and fathers receive sixteen weeks away with full pay.\n",
        "how much time off do I get when my baby is born",
    ),
    (
        "hr/expenses.md",
        "# Expenses\n\nSubmit receipts within a month; meals while travelling are reimbursed up to a daily cap.\n",
        "can I get paid back for dinner on a business trip",
    ),
    (
        "eng/code-review.md",
        "# Code review\n\nEvery pull request needs one approval from an owner of the touched module before merge.\n",
        "who has to sign off before my change lands",
    ),
    (
        "eng/oncall.md",
        "# On-call rotation\n\nThe pager moves to the next engineer each Monday at ten; handover happens in chat.\n",
        "when does the duty for overnight incidents switch to a colleague",
    ),
    (
        "eng/feature-flags.md",
        "# Feature flags\n\nToggle unfinished functionality per customer from the flags dashboard without a deploy.\n",
        "turn a half-built capability on for one client only",
    ),
    (
        "sales/pricing.md",
        "# Pricing\n\nThe team plan costs twelve dollars per seat monthly; annual billing gets two months free.\n",
        "what does it cost for each user",
    ),
    (
        "support/refunds.md",
        "# Refunds\n\nCustomers may cancel within fourteen days and receive their money back in full.\n",
        "a buyer changed their mind, can they return it",
    ),
    (
        "it/vpn.md",
        "# VPN\n\nInstall WireGuard, import the profile from the portal, and connect before opening internal tools.\n",
        "accessing company systems from home",
    ),
    (
        "it/laptop.md",
        "# Laptops\n\nHardware is replaced every three years; request a new machine through the service desk.\n",
        "my computer is old, how do I get a replacement",
    ),
    (
        "security/phishing.md",
        "# Phishing\n\nForward suspicious emails to the security mailbox and never click unknown links.\n",
        "I received a strange message asking for my password",
    ),
    (
        "security/mfa.md",
        "# Two-factor authentication\n\nEnrol a hardware key or an authenticator app; SMS codes are not accepted.\n",
        "second step when signing in",
    ),
    (
        "product/roadmap.md",
        "# Roadmap\n\nNext quarter we ship offline mode, then a redesigned mobile editor.\n",
        "what are we building after this season",
    ),
    (
        "office/parking.md",
        "# Parking\n\nThe garage under the building has forty spots; book one in the app the day before.\n",
        "where can I leave my car at work",
    ),
    (
        "office/kitchen.md",
        "# Kitchen\n\nClean your dishes, label food in the fridge, and the fridge is emptied on Fridays.\n",
        "rules for storing lunch at the office",
    ),
    (
        "finance/invoices.md",
        "# Invoices\n\nVendors are paid net thirty after the purchase order is matched to the bill.\n",
        "when do suppliers receive their payment",
    ),
    (
        "eng/incident-review.md",
        "# Postmortems\n\nAfter an outage we write a blameless report within five days with action items.\n",
        "what happens after the site goes down",
    ),
    (
        "eng/testing.md",
        "# Testing\n\nUnit suites run on every push; the browser suite runs nightly against staging.\n",
        "how often are automated checks executed",
    ),
    (
        "hr/onboarding.md",
        "# Onboarding\n\nA buddy guides each new hire through their first two weeks and introduces the team.\n",
        "my first days as a newcomer, who helps me",
    ),
    (
        "legal/nda.md",
        "# NDAs\n\nNon-disclosure agreements with partners go through legal; use the standard template.\n",
        "confidentiality contract before sharing secrets with another firm",
    ),
    (
        "eng/logging.md",
        "# Logging\n\nStructured JSON logs ship to the aggregator; keep personal data out of log lines.\n",
        "can I record customer emails in diagnostic output",
    ),
    (
        "ops/scaling.md",
        "# Autoscaling\n\nThe cluster adds nodes when CPU stays above seventy percent for five minutes.\n",
        "what makes us get more servers under heavy load",
    ),
    (
        "hr/remote-work.md",
        "# Remote work\n\nStaff may work from anywhere in their country up to three days per week.\n",
        "can I do my job from my house",
    ),
    (
        "support/escalation.md",
        "# Escalation\n\nTickets unanswered after four hours page the support lead automatically.\n",
        "a client request has been waiting too long",
    ),
]

FILLER_TOPICS = [
    "quarterly budget planning for the marketing department",
    "release notes of the billing service version two",
    "architecture of the search indexing service",
    "guidelines for writing public blog posts",
    "office holiday party organisation",
    "design system colours and typography",
    "accessibility checklist for web pages",
    "data retention rules for analytics events",
    "mobile app crash reporting setup",
    "glossary of product terms",
    "conference travel sponsorship process",
    "translation workflow for the help centre",
    "database schema conventions and naming",
    "API versioning and deprecation policy",
    "customer interview notes from the spring",
    "competitor analysis of note taking apps",
    "recruiting pipeline and interview stages",
    "brand voice and tone for support replies",
    "weekly metrics review agenda",
    "charity volunteering day logistics",
]


def fillers() -> list[tuple[str, str]]:
    """Forty filler documents, two per topic."""
    documents = []
    for n, topic in enumerate(FILLER_TOPICS):
        for part in (1, 2):
            title = topic.capitalize()
            body = f"# {title} (part {part})\n\nThis page covers {topic}. Part {part} lists owners and open items.\n"
            documents.append((f"misc/topic-{n:02d}-{part}.md", body))
    return documents
