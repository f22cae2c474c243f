"""Captured bulk contents are compressed with lz4 on PostgreSQL (14 and later, when built with it).

PostgreSQL's default, pglz, compresses at about the speed of the tokenizer itself, so it alone
halved the speed of an ingest; lz4 compresses several times faster for somewhat larger storage.
Only values written from now on are affected. Other databases: nothing to do.
"""

from django.db import migrations

LZ4 = """
DO $$
BEGIN
    ALTER TABLE ingest_bulkcontent ALTER COLUMN text SET COMPRESSION {method};
EXCEPTION WHEN feature_not_supported OR invalid_parameter_value THEN
    RAISE NOTICE 'lz4 is not available: bulk contents keep the default compression';
END $$;
"""


def _set(method):
    def run(apps, schema_editor):
        connection = schema_editor.connection
        if connection.vendor == "postgresql" and connection.pg_version >= 140000:
            schema_editor.execute(LZ4.format(method=method))

    return run


class Migration(migrations.Migration):
    dependencies = [("ingest", "0006_job_ranges_and_pairing_state")]

    operations = [migrations.RunPython(_set("lz4"), _set("pglz"))]
