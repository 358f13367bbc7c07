from django.urls import path

from . import views

urlpatterns = [
    path("", views.create, name="share-create"),
    path("<int:pk>", views.detail, name="share-detail"),
    path("<int:pk>/revoke", views.revoke, name="share-revoke"),
    path("<int:pk>/period", views.period, name="share-period"),
]
