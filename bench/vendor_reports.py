"""The vendor reports the scenarios reproduce, cited by public title and URL.

A scenario's SEED names one of these (or is None); the report prints the
title and URL, so a reader without this repository's shared/ folder can
find the original."""

REPORTS = {
    "edb-tde-epas15": (
        "EDB, “Transparent Data Encryption Impacts on EDB Postgres Advanced Server 15” (2023)",
        "https://www.enterprisedb.com/blog/TDE-Postgres-Advanced-Server-15-Launch",
    ),
    "cybertec-tde-performance": (
        "CYBERTEC, “PostgreSQL performance: Encrypted vs. unencrypted” (PostgreSQL 13 TDE)",
        "https://www.cybertec-postgresql.com/en/postgresql-tde-performance/",
    ),
    "alibaba-always-confidential": (
        "Alibaba Cloud, “ApsaraDB RDS: Performance testing reports of the Always confidential"
        " database feature” (2024)",
        "https://www.alibabacloud.com/help/en/rds/apsaradb-rds-for-postgresql/"
        "performance-testing-reports-of-fully-encrypted-databases",
    ),
    "cybertec-tde-checksums-pgee": (
        "CYBERTEC, “The Cost of TDE and Checksums in PGEE” (2025)",
        "https://www.cybertec-postgresql.com/en/the-cost-of-tde-and-checksums-in-pgee",
    ),
}


def citation(seed):
    """Markdown: the report's title linked to its URL"""
    title, url = REPORTS[seed]
    return f"[{title}]({url})"
