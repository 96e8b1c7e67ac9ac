"""Search terms another term of the same run covers are removed (DESIGN.md section 6.8): a
search matches a run when one of its terms starts with what was typed, so a term that is the
start of another term of its run (or has the same text under another kind) finds nothing the
longer one does not. New intents store no such term (``runtime.core.search_text.events_terms``);
this removes the ones stored before, run by run, across each run's whole set of terms."""

from django.db import migrations

BATCH = 1_000


def compact(apps, schema_editor):
    """Per run: read its terms, delete the covered ones (and same-text duplicates) by id, in
    batches. Memory is one run's terms at a time."""
    from runtime.core.search_text import terms_covered

    term_model = apps.get_model("runtime", "RunSearchTerm")
    alias = schema_editor.connection.alias
    terms = term_model.objects.using(alias)
    # Listed first: no cursor stays open on the table while its rows are deleted (SQLite).
    run_ids = list(terms.order_by("run_id").values_list("run_id", flat=True).distinct())
    for run_id in run_ids:
        rows = list(terms.filter(run_id=run_id).order_by("id").values_list("id", "term"))
        covered = terms_covered(term for _, term in rows)
        seen: set[str] = set()
        doomed = []
        for row_id, term in rows:
            if term in covered or term in seen:
                doomed.append(row_id)
            seen.add(term)
        for start in range(0, len(doomed), BATCH):
            terms.filter(id__in=doomed[start:start + BATCH]).delete()


class Migration(migrations.Migration):
    dependencies = [("runtime", "0015_archive_runs")]

    operations = [migrations.RunPython(compact, migrations.RunPython.noop, elidable=True)]
