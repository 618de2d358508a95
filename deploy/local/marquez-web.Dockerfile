# Marquez Web from its prebuilt bundle, served with the Marquez API proxied under /api (the way
# marquezproject/marquez-web does): MARQUEZ_HOST, MARQUEZ_PORT and WEB_PORT as in that image.
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
COPY dist /srv/marquez-web
COPY marquez_web_server.py /srv/
ENV WEB_HOST=127.0.0.1 WEB_PORT=3000 MARQUEZ_HOST=127.0.0.1 MARQUEZ_PORT=5000
CMD ["python", "/srv/marquez_web_server.py", "/srv/marquez-web"]
