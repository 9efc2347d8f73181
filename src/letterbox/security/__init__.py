# Access control, in Apache Pulsar's model: TLS, authentication providers and
# authorization (roles, tenant admins, namespace and topic permissions).
