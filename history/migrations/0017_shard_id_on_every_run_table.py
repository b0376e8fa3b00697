"""Signal request ids, queries and payload references carry their run's ``shard_id``, as
every other table whose rows belong to one run does: the column a distributed PostgreSQL
distributes those tables by (docs/scale-out.md). Existing rows take their run's shard."""

from django.db import migrations, models

TABLES = ("history_signalrequest", "history_workflowquery", "history_payloadreference")


def _fill(table: str) -> str:
    return (
        f"UPDATE {table} AS r SET shard_id = e.shard_id FROM history_workflowexecution AS e "
        "WHERE e.run_id = r.run_id"
    )


class Migration(migrations.Migration):
    dependencies = [
        ("history", "0016_skipped_clock"),
    ]

    operations = [
        *(
            migrations.AddField(
                model_name=model,
                name="shard_id",
                field=models.IntegerField(default=0),
                preserve_default=False,
            )
            for model in ("signalrequest", "workflowquery", "payloadreference")
        ),
        *(migrations.RunSQL(_fill(table), reverse_sql=migrations.RunSQL.noop) for table in TABLES),
    ]
