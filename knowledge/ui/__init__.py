"""Server-rendered reader pages (Django templates, session login) over the knowledge selectors."""
