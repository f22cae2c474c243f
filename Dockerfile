FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
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
RUN pip install . && useradd --create-home app && mkdir -p /app/var && chown -R app /app/var
USER app
RUN DEBUG=false SECRET_KEY=build-only ALLOWED_HOSTS=x python manage.py collectstatic --noinput
EXPOSE 8000
CMD ["gunicorn", "config.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "3", "--access-logfile", "-"]
