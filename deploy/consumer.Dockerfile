# The consumer service: Kafka consumer group + Marquez-compatible API on port 5000.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY emitter ./emitter
COPY consumer ./consumer
RUN pip install --no-cache-dir ".[consumer]"
EXPOSE 5000
ENTRYPOINT ["python", "-m", "consumer"]
CMD ["serve", "--host", "0.0.0.0", "--port", "5000"]
