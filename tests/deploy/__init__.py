"""The production process layout as runtime/docs/guides/deploy.md documents it: its settings pass
``check --deploy`` and its processes run a real run on PostgreSQL and Redis."""
