from django.apps import AppConfig


class SharesConfig(AppConfig):
    name = "shares"
    verbose_name = "Expiring file shares"
