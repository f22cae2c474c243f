"""Every model has an admin page."""

from __future__ import annotations

from django.urls import reverse


def test_every_model_has_an_admin_page_that_loads(client, django_user_model, db):
    from django.apps import apps
    from django.contrib import admin

    admin_user = django_user_model.objects.create_superuser("op", "op@localhost", "pw-for-tests-123")
    client.force_login(admin_user)
    for app in ("dashboard", "ingest"):
        for model in apps.get_app_config(app).get_models():
            assert model in admin.site._registry, f"{model.__name__} has no admin"
            url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
            assert client.get(url).status_code == 200, url
