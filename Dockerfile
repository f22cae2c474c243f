FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
# Built into the image, outside the /app/var data volume: a volume keeps its old files across an
# image upgrade, and a stale manifest there would make every page a 500.
ENV STATIC_ROOT=/app/staticfiles
WORKDIR /app
COPY pyproject.toml README.md ./
COPY config ./config
COPY dashboard ./dashboard
COPY ingest ./ingest
COPY mcptax ./mcptax
COPY examples ./examples
COPY templates ./templates
COPY static ./static
COPY manage.py ./
RUN pip install . && useradd --create-home app && mkdir -p /app/var /app/staticfiles && chown -R app /app/var
RUN DEBUG=false SECRET_KEY=build-only ALLOWED_HOSTS=x VAR_DIR=/tmp/build-var python manage.py collectstatic --noinput
USER app
EXPOSE 8000
CMD ["gunicorn", "config.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "3", "--access-logfile", "-"]
