from .base import Backend, load_backend
from .bert import BertBackend, default_model_path
