from django.urls import include, path

urlpatterns = [path("shares/", include("shares.urls"))]
